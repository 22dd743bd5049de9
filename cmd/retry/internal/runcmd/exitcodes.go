package runcmd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// exitCodes is the --on-exit list: the exit statuses that are retried.
type exitCodes []int

// retries reports whether status is retried: any non-zero status if the list
// was not given.
func (c exitCodes) retries(status int) bool {
	if c == nil {
		return status != 0
	}
	return slices.Contains(c, status)
}

func (c *exitCodes) String() string {
	if c == nil || *c == nil {
		return "any non-zero status"
	}
	s := make([]string, len(*c))
	for i, code := range *c {
		s[i] = strconv.Itoa(code)
	}
	return strings.Join(s, ",")
}

// Set adds comma-separated statuses, each from 1 to 255.
func (c *exitCodes) Set(v string) error {
	for field := range strings.SplitSeq(v, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || code < 1 || code > 255 {
			return fmt.Errorf("want exit statuses from 1 to 255 separated by commas, such as 1,75; %q is not one", field)
		}
		*c = append(*c, code)
	}
	return nil
}
