// Package structure has no code: its tests hold the repository to the
// shape docs/architecture.md describes, so that a limit once reached
// cannot slip back unnoticed (no function over MaxFuncLines lines).
package structure

// MaxFuncLines is the longest a non-test function may be, from its func
// keyword to its closing brace: past it, a function does several things
// that deserve names of their own.
const MaxFuncLines = 150
