//! The step schedule (torch.profiler's `schedule`): which steps are
//! skipped, warmed up and recorded.
//!
//! Steps are counted from 0 by the profiler's `step()` calls. The first
//! `skip_first` steps are not recorded; then each cycle is `wait` steps not
//! recorded, `warmup` steps recorded and thrown away (the backend's start-up
//! costs land there), and `active` steps recorded; the cycle's trace is
//! handed to `on_trace_ready` when its last active step ends. `repeat`
//! cycles, or without end when `repeat` is 0.

use serde::{Deserialize, Serialize};

/// What the profiler does during one step.
///
/// What a [`Schedule`] says to do at a step;
/// [`Profiler`](crate::profile::Profiler)'s example steps through one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Not recording.
    None,
    /// Recording, to be thrown away.
    Warmup,
    /// Recording.
    Record,
    /// Recording; the cycle's trace is ready when this step ends.
    RecordAndSave,
}

impl Action {
    /// Whether the backend records during the step.
    pub fn records(self) -> bool {
        !matches!(self, Action::None)
    }
}

/// The schedule (see the module docs).
///
/// [`Profiler`](crate::profile::Profiler)'s example uses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Steps not recorded before the first cycle.
    pub skip_first: u64,
    /// Steps not recorded at the start of each cycle.
    pub wait: u64,
    /// Steps recorded and thrown away, after `wait`.
    pub warmup: u64,
    /// Steps recorded, after `warmup`; at least 1.
    pub active: u64,
    /// Cycles; 0 repeats without end.
    pub repeat: u64,
}

impl Schedule {
    /// `wait`, `warmup` and `active` steps per cycle, `repeat` cycles, no
    /// steps skipped first.
    pub fn new(wait: u64, warmup: u64, active: u64, repeat: u64) -> Schedule {
        Schedule { skip_first: 0, wait, warmup, active, repeat }
    }

    /// The same with `skip_first` steps skipped before the first cycle.
    pub fn skip_first(mut self, skip_first: u64) -> Schedule {
        self.skip_first = skip_first;
        self
    }

    /// Checks the schedule can record something.
    ///
    /// # Errors
    /// A message when `active` is 0.
    pub fn validate(&self) -> Result<(), String> {
        if self.active == 0 {
            return Err("schedule: `active` must be at least 1 (nothing would ever be recorded)".into());
        }
        Ok(())
    }

    /// Steps per cycle.
    pub fn cycle_len(&self) -> u64 {
        self.wait + self.warmup + self.active
    }

    /// What happens during step `step` (0-based).
    pub fn action(&self, step: u64) -> Action {
        let n = self.cycle_len();
        if step < self.skip_first || n == 0 || self.active == 0 {
            return Action::None;
        }
        let s = step - self.skip_first;
        if self.repeat > 0 && s / n >= self.repeat {
            return Action::None;
        }
        let m = s % n;
        if m < self.wait {
            Action::None
        } else if m < self.wait + self.warmup {
            Action::Warmup
        } else if m + 1 < n {
            Action::Record
        } else {
            Action::RecordAndSave
        }
    }

    /// The first active step of the cycle whose last step is `save_step`.
    pub fn first_active(&self, save_step: u64) -> u64 {
        save_step + 1 - self.active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_actions_follow_skip_wait_warmup_active_and_stop_after_repeat() {
        let s = Schedule::new(1, 1, 2, 2).skip_first(2);
        let got: Vec<Action> = (0..14).map(|i| s.action(i)).collect();
        use Action::*;
        assert_eq!(
            got,
            [
                None,
                None,
                None,
                Warmup,
                Record,
                RecordAndSave,
                None,
                Warmup,
                Record,
                RecordAndSave,
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(s.first_active(5), 4);
    }

    #[test]
    fn repeat_zero_cycles_forever_and_active_one_saves_every_cycle() {
        let s = Schedule::new(0, 0, 1, 0);
        assert!((0..1000).all(|i| s.action(i) == Action::RecordAndSave));
        let s = Schedule::new(2, 0, 1, 0);
        let saves = (0..30).filter(|&i| s.action(i) == Action::RecordAndSave).count();
        assert_eq!(saves, 10);
    }

    #[test]
    fn a_schedule_without_active_steps_is_refused() {
        assert!(Schedule::new(1, 1, 0, 1).validate().unwrap_err().contains("active"));
        assert!(Schedule::new(0, 0, 1, 1).validate().is_ok());
    }
}
