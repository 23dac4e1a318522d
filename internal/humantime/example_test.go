package humantime_test

import (
	"fmt"
	"time"

	"github.com/loopd/loopd/internal/humantime"
)

func ExampleParse() {
	for _, s := range []string{"2h 30m", "1 hour 30 minutes", "1.5h", "1day", "0"} {
		d, err := humantime.Parse(s)
		fmt.Println(d, err)
	}
	_, err := humantime.Parse("2hx")
	fmt.Println(err)
	// Output:
	// 2h30m0s <nil>
	// 1h30m0s <nil>
	// 1h30m0s <nil>
	// 24h0m0s <nil>
	// 0s <nil>
	// unknown unit "hx" in "2hx"
}

func ExampleFormat() {
	fmt.Println(humantime.Format(150 * time.Minute))
	fmt.Println(humantime.Format(26 * time.Hour))
	fmt.Println(humantime.Format(90 * time.Millisecond))
	// Output:
	// 2h 30m
	// 1day 2h
	// 90ms
}
