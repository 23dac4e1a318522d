import unittest


class TestOK(unittest.TestCase):
    def test_fine(self):
        self.assertTrue(True)
