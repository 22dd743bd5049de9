//go:build !race

package awsretry_test

const raceEnabled = false
