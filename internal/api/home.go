package api

import (
	"errors"
	"os"
	"path/filepath"
)

// DefaultHome is LOOPD_HOME when it is not set: $XDG_STATE_HOME/loop, else
// ~/.local/state/loop. Both binaries use it, so loopctl finds the socket of
// a daemon started with defaults.
func DefaultHome() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "loop"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("cannot locate the state directory: set LOOPD_HOME or HOME")
	}
	return filepath.Join(home, ".local", "state", "loop"), nil
}

// Home returns LOOPD_HOME, or DefaultHome when it is unset.
func Home() (string, error) {
	if h := os.Getenv("LOOPD_HOME"); h != "" {
		return filepath.Abs(h)
	}
	return DefaultHome()
}

// SocketPath returns where loopctl looks for the daemon: LOOPD_SOCKET, else
// LOOPD_HOME/loopd.sock.
func SocketPath() (string, error) {
	if s := os.Getenv("LOOPD_SOCKET"); s != "" {
		return filepath.Abs(s)
	}
	home, err := Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "loopd.sock"), nil
}
