package config

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// DurationUnits is how a duration is written, in the config file and on
// the command line alike (ParseDuration), for messages that teach it.
const DurationUnits = `a number and a unit, e.g. "30s", "5m", "36h", "7d" or "1d12h" (` + durationUnitWords + `)`

const durationUnitWords = "units: ms, s, m, h, d for days, w for weeks"

// ParseDuration reads a duration the way ifaced writes them everywhere:
// config values (Duration) and command-line flags (`introduce --expires
// 7d`) share this one parser, so what works in one works in the other.
//
// It is Go's time.ParseDuration ("90s", "1h30m", "1.5h"; units ns, us,
// ms, s, m, h) with two more units: d, a day of 24 hours, and w, a week
// of 7 days, whole or fractional, alone or combined with the others
// ("7d", "2w", "1.5d", "1d12h"). A day is always 24 hours: a duration is
// elapsed time, not a calendar date. The sign, if any, is Go's; callers
// decide whether zero or negative durations make sense.
//
// Decision: no library reads exactly this. prometheus/common's
// model.ParseDuration knows d and w but refuses fractions and "1.5s",
// which time.ParseDuration (and so every config written so far) accepts;
// here Go's parser does all the work except the two units it lacks.
func ParseDuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%q is not a duration: write %s", s, DurationUnits)
	}
	rest, sign := s, ""
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		sign, rest = rest[:1], rest[1:]
	}
	if rest == "" {
		return bad()
	}
	isNum := func(c byte) bool { return c == '.' || c >= '0' && c <= '9' }
	var days float64 // the d and w parts, in days
	goPart := sign
	for rest != "" {
		i := 0
		for i < len(rest) && isNum(rest[i]) {
			i++
		}
		j := i
		for j < len(rest) && !isNum(rest[j]) {
			j++
		}
		num, unit := rest[:i], rest[i:j]
		rest = rest[j:]
		switch unit {
		case "d", "w":
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return bad()
			}
			if unit == "w" {
				v *= 7
			}
			days += v
		default:
			goPart += num + unit
		}
	}
	var d time.Duration
	if goPart != sign {
		var err error
		if d, err = time.ParseDuration(goPart); err != nil {
			return bad()
		}
	}
	if days == 0 {
		return d, nil
	}
	const maxDays = math.MaxInt64 / float64(24*time.Hour)
	if days > maxDays {
		return 0, fmt.Errorf("%q is too long a duration (at most %.0f days)", s, math.Floor(maxDays))
	}
	extra := time.Duration(days * float64(24*time.Hour))
	if sign == "-" {
		extra = -extra
	}
	sum := d + extra
	if (extra > 0 && sum < d) || (extra < 0 && sum > d) {
		return 0, fmt.Errorf("%q is too long a duration (at most %.0f days)", s, math.Floor(maxDays))
	}
	return sum, nil
}
