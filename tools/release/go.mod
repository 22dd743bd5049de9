module github.com/retrykit/retry/tools/release

go 1.26

require golang.org/x/mod v0.38.0
