// Package calc is the quickstart's example project: four functions that
// start out wrong. The demo agent fixes them, one per iteration, guided by
// the failing tests loopd feeds back into its prompt.
package calc

// Add returns a + b.
func Add(a, b int) int {
	return 0 // TODO
}

// Sub returns a - b.
func Sub(a, b int) int {
	return 0 // TODO
}

// Mul returns a * b.
func Mul(a, b int) int {
	return 0 // TODO
}

// Max returns the larger of a and b.
func Max(a, b int) int {
	return 0 // TODO
}
