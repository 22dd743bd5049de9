//go:build !race

package redisquota_test

const raceEnabled = false
