package main

import "syscall"

// syscallZero probes a process without signalling it.
const syscallZero = syscall.Signal(0)
