package awsretry

// Parked returns how many calls r holds parked, awaiting GetRetryToken.
func Parked(r *Retryer) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parked)
}
