module github.com/retrykit/retry

go 1.26
