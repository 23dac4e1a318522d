package config

import (
	"fmt"
	"strings"
)

// setRedactSecrets reads redact_secrets: true/false (also yes/no, on/off,
// 1/0, any case).
func setRedactSecrets(c *Config, v, _ string) string {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1":
		c.RedactSecrets = true
	case "false", "no", "off", "0":
		c.RedactSecrets = false
	default:
		return fmt.Sprintf("must be true or false, got %q", v)
	}
	return ""
}
