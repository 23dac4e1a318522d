package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
		wantErr string // {file} is the env file's path
	}{
		{
			name: "sorted, with comments, quotes, export and expansion",
			content: "# local secrets\n" +
				"ZED=last\n" +
				"export API_KEY=abc123\n" +
				"\n" +
				"GREETING=\"hello world\"\n" +
				"LITERAL='$API_KEY'\n" +
				"URL=https://${HOST}/x\n" +
				"HOST=example.test\n" +
				"MULTI=\"a\\nb\"\r\n",
			want: []string{
				"API_KEY=abc123",
				"GREETING=hello world",
				"HOST=example.test",
				"LITERAL=$API_KEY",
				"MULTI=a\nb",
				"URL=https:///x", // godotenv expands only variables defined above
				"ZED=last",
			},
		},
		{
			name:    "empty file",
			content: "",
			want:    []string{},
		},
		{
			name:    "a bad character in a name, located",
			content: "A=1\n# c\nMY-VAR=secret\n",
			wantErr: `{file}:3: invalid env file: unexpected character "-" in a variable name (names are letters, digits, '_' and '.')`,
		},
		{
			name:    "a line without equals, located",
			content: "A=1\nOOPS\nB=2\n",
			wantErr: `{file}:2: invalid env file: a line has no "=" (expected NAME=value)`,
		},
		{
			name:    "a last line without equals",
			content: "A=1\nOOPS",
			wantErr: `{file}:2: invalid env file: a line has no "=" (expected NAME=value)`,
		},
		{
			name:    "an unterminated quote, located, without the secret",
			content: "A=1\r\nTOKEN='s3cr3t\r\nB=2\r\n",
			wantErr: `{file}:2: invalid env file: unterminated quoted value`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "test.env")
			writeFile(t, path, tt.content)
			got, err := LoadEnvFile(path)
			if tt.wantErr != "" {
				want := strings.ReplaceAll(tt.wantErr, "{file}", path)
				if err == nil || err.Error() != want {
					t.Fatalf("LoadEnvFile error = %v, want %q", err, want)
				}
				if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "secret") {
					t.Fatalf("error %q quotes a value", err)
				}
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("%v is not a *ConfigError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("LoadEnvFile =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing.env")
		_, err := LoadEnvFile(path)
		if want := path + ": cannot read: file does not exist"; err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("LoadEnvFile error = %v, want %q wrapping fs.ErrNotExist", err, want)
		}
	})
	t.Run("too large", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.env")
		writeFile(t, path, "A="+strings.Repeat("x", maxEnvFileBytes)+"\n")
		_, err := LoadEnvFile(path)
		if want := path + ": cannot read: file is larger than 1 MiB"; err == nil || err.Error() != want {
			t.Fatalf("LoadEnvFile error = %v, want %q", err, want)
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		dir := t.TempDir()
		_, err := LoadEnvFile(dir)
		if want := dir + ": cannot read: not a regular file"; err == nil || err.Error() != want {
			t.Fatalf("LoadEnvFile error = %v, want %q", err, want)
		}
	})
	t.Run("permission denied", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads any file")
		}
		path := filepath.Join(t.TempDir(), "locked.env")
		writeFile(t, path, "A=1\n")
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		_, err := LoadEnvFile(path)
		if want := path + ": cannot read: permission denied"; err == nil || err.Error() != want {
			t.Fatalf("LoadEnvFile error = %v, want %q", err, want)
		}
	})
}

func TestWrittenEnvValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".env")
	data := "# keys\nexport PRIVATE_KEY=\"-----BEGIN KEY-----\\nMHcCAQEE\\n-----END KEY-----\"\r\nTOKEN='abc def'\nPLAIN=value # note\n\nnot a line\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`PRIVATE_KEY="-----BEGIN KEY-----\nMHcCAQEE\n-----END KEY-----"`, `PRIVATE_KEY=-----BEGIN KEY-----\nMHcCAQEE\n-----END KEY-----`,
		`TOKEN='abc def'`, `TOKEN=abc def`,
		`PLAIN=value # note`,
	}
	if got := WrittenEnvValues(path); !slices.Equal(got, want) {
		t.Errorf("WrittenEnvValues = %q\nwant %q", got, want)
	}
	if got := WrittenEnvValues(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Errorf("a missing file gives %q", got)
	}
}
