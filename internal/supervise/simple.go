package supervise

import "strings"

// unsafeFirstWords are builtins that, run by the wrapper shell itself,
// could replace it (exec), change what it does at exit (trap, exit,
// return), run code that could (., source, eval, command, builtin), or
// reach its own variables and process (set, unset, shift, readonly,
// export, kill, wait, cd, local, alias, break, continue).
var unsafeFirstWords = map[string]bool{
	"exec": true, "trap": true, "exit": true, "return": true, ".": true, "source": true, "eval": true,
	"command": true, "builtin": true, "set": true, "unset": true, "shift": true, "readonly": true,
	"export": true, "kill": true, "wait": true, "cd": true, "local": true, "alias": true,
	"break": true, "continue": true, "times": true, "umask": true, "ulimit": true,
}

// simple reports whether a shell command is one plain command — words of
// ordinary characters and quoted strings without expansions, no operators,
// redirections, substitutions or compound syntax — whose first word is not
// a builtin that could change the shell running it. Such a command can be
// evaluated by the wrapper itself (saving a fork per step): nothing in it
// can replace the wrapper or stop it from recording the status. Anything
// else runs in a subshell. It is deliberately conservative: a false "no"
// costs a fork, a false "yes" would cost a lost status.
func simple(cmd string) bool {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return false
			}
			cur.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(cmd[i+1:], '"')
			if j < 0 {
				return false
			}
			s := cmd[i+1 : i+1+j]
			if strings.ContainsAny(s, "$`\\!") {
				return false
			}
			cur.WriteString(s)
			i += j + 1
			inWord = true
		case isPlain(c):
			cur.WriteByte(c)
			inWord = true
		default:
			return false // $ ` \ ; & | < > ( ) { } * ? [ ] ~ # ! newline and the rest
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 || strings.Contains(words[0], "=") {
		return false // empty, or an assignment
	}
	return !unsafeFirstWords[words[0]]
}

func isPlain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("_-./:=@%+,^", c) >= 0
}
