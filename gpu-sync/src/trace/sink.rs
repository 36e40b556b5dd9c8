//! Where records go: the recorders alive, by device.

use super::RangeRecord;

/// A range ended on some thread: every live recorder gets it.
pub(super) fn range_ended(rec: RangeRecord) {
    let _ = rec;
}
