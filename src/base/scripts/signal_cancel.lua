-- SIGNAL_CANCEL: wakes a blocked waiter that is being cancelled (`Cancel::cancel`) by pushing
-- the cancel mark onto its signal list.
--
-- KEYS[1] the waiter's signal list. ARGV[1] the mark, ARGV[2] lifetime of the list in ms (so a
-- mark for a waiter that is gone does not stay).
-- Returns 1.
signal(KEYS[1], ARGV[1], ARGV[2])
return 1
