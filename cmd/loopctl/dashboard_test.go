package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoginPageIsPrivateAndLeadsToTheLink(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	const link = "http://loopd-0123456789abcdef0123456789abcdef.localhost:7777/login?code=3f9c0123456789abcdef0123456789ab"
	page, err := writeLoginPage(link)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "3f9c") {
		t.Fatalf("the page's path %q holds the code", page)
	}
	fi, err := os.Stat(page)
	if err != nil {
		t.Fatal(err)
	}
	di, _ := os.Stat(filepath.Dir(page))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("page %v in a %v directory, want 0600 in 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	b, _ := os.ReadFile(page)
	for _, want := range []string{`content="0;url=` + link + `"`, `href="` + link + `"`, `name="referrer" content="no-referrer"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the page lacks %s:\n%s", want, b)
		}
	}
}

func TestStaleLoginPagesAreRemoved(t *testing.T) {
	tmp := t.TempDir()
	old, fresh, other := filepath.Join(tmp, loginPageDir+"old"), filepath.Join(tmp, loginPageDir+"fresh"), filepath.Join(tmp, "unrelated")
	for _, d := range []string{old, fresh, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-time.Hour)
	for _, d := range []string{old, other} {
		if err := os.Chtimes(d, long, long); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleLoginPages(tmp, time.Now().Add(-staleLoginPage))
	for d, kept := range map[string]bool{old: false, fresh: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != kept {
			t.Errorf("%s: kept=%v, want %v", filepath.Base(d), err == nil, kept)
		}
	}
}
