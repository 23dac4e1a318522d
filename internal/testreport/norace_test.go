//go:build !race

package testreport

// raceEnabled reports a -race build: TestParse200MB then reads less, since the detector slows it down.
const raceEnabled = false
