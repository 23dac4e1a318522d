// Command gendocs writes the generated reference pages of docs/ (see
// package docgen). Run it from the repository root:
//
//	go run ./internal/docgen/gendocs
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/loopd/loopd/internal/docgen"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	pages, err := docgen.Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	for _, page := range slices.Sorted(maps.Keys(pages)) {
		path := filepath.Join(*root, page)
		if err := os.WriteFile(path, pages[page], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", page)
	}
}
