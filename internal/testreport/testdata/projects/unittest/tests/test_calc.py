import unittest


class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(1 + 1, 2)

    def test_add_negative(self):
        self.assertEqual(-1 + -1, -2)

    def test_add_wrong(self):
        self.assertEqual(1 + 1, 3)

    def test_raises(self):
        raise RuntimeError("boom")

    @unittest.skip("not on this machine")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_known_bug(self):
        self.assertEqual(0, 1)

    def test_subtests(self):
        for n in (1, 2):
            with self.subTest(n=n):
                self.assertEqual(n % 2, 1)


class TestStrings(unittest.TestCase):
    def test_upper(self):
        self.assertEqual("a".upper(), "A")
