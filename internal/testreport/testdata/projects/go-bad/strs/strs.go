package strs

import "strings"

func Upper(s string) string { return strings.ToUpper(s) }
