//go:build !race

package grpcretry

const raceEnabled = false
