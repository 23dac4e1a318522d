module example.com/flaky

go 1.26
