//! Methods: how each [`Mode`] measures, one file each, behind one trait.
//! A method picks its time source from [`crate::clock`], runs the one
//! sampling loop ([`Bench::sample`]) and says when it cannot run here. A new
//! mode is a new file and one entry in [`METHODS`], not an arm in a central
//! match.

mod batch;
mod cold;
mod first_call;
mod graph;
mod hot;
mod kernel;

use crate::bench::{Bench, FirstCall};
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record};
use crate::timer::Timer;
use gpu_sync::Stream;

/// One way of timing the same work.
pub(crate) trait Method: Sync {
    /// The mode it measures.
    fn mode(&self) -> Mode;

    /// Measures `f` on `timer`'s stream. `None` when the mode cannot run
    /// here and the bench is best-effort (the reason is then a warning in
    /// `rec`, through [`Bench::unavailable`]); `first` is the optional
    /// first-call closure.
    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        rec: &mut Record,
        first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>>;
}

/// Every method.
static METHODS: [&dyn Method; 6] = [
    &first_call::FirstCallMethod,
    &cold::ColdMethod,
    &hot::HotMethod,
    &batch::BatchMethod,
    &graph::GraphMethod,
    &kernel::KernelMethod,
];

/// The method that measures `mode`.
pub(crate) fn find(mode: Mode) -> Option<&'static dyn Method> {
    METHODS.iter().copied().find(|m| m.mode() == mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_exactly_one_method() {
        for m in Mode::ALL {
            assert_eq!(METHODS.iter().filter(|x| x.mode() == m).count(), 1, "{}", m.name());
            assert_eq!(find(m).map(|x| x.mode()), Some(m));
        }
    }
}
