package testreport_test

import (
	"fmt"
	"strings"

	"github.com/loopd/loopd/internal/testreport"
)

func ExampleParse() {
	// Two verification commands in one step, as loopd logs them: the failures add up; go test
	// without -v prints no pass lines, so the passed total is unknown rather than a guess.
	log := "$ go test ./...\n" +
		"--- FAIL: TestTable (0.00s)\n" +
		"    --- FAIL: TestTable/case_b (0.00s)\n" +
		"FAIL\texample.com/calc\t0.003s\n" +
		"$ python3 -m pytest\n" +
		"FAILED tests/test_x.py::test_y - assert 1 == 2\n" +
		"==================== 1 failed, 4 passed, 1 skipped in 0.05s ====================\n"
	res, err := testreport.Parse(strings.NewReader(log))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Formats)
	fmt.Println(res.Summary())
	fmt.Println(res.VerificationFailed(0)) // exit code 0, but the output shows failures
	// Output:
	// [go pytest]
	// 3 failed (TestTable, TestTable/case_b, tests/test_x.py::test_y), passed count unknown
	// true
}

func ExampleResult_Summary() {
	res, err := testreport.Parse(strings.NewReader(
		"test result: FAILED. 12 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.10s\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Summary())
	// Output:
	// 12 passed, 2 failed, 1 skipped
}
