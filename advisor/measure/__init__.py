"""measure: what one log shows (its steady window, observed rate, queue depths, within-log contention)."""
