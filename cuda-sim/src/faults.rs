//! Fault injection: make chosen driver calls of a session fail.

use cuda_sys::CUresult;

/// One rule of a [`FaultPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// The `n`-th counted call of the session (0-based, all names).
    Nth { n: u64, code: CUresult },
    /// Every call of this entry point.
    Every { name: String, code: CUresult },
    /// The `k`-th call (0-based) of this entry point.
    NthOf { name: String, k: u64, code: CUresult },
}

/// Which driver calls of a session fail, and with which `CUresult`.
///
/// Calls are counted per session from its creation, in the order of
/// [`Session::calls`](crate::Session::calls) (`cuGetErrorName` and
/// `cuGetErrorString` are never counted nor failed). A failed call returns
/// its code without doing anything. A sticky code
/// ([`CuError::is_sticky`](cuda_sys::CuError::is_sticky), e.g.
/// `CUDA_ERROR_ILLEGAL_ADDRESS`) also poisons the session: every later call
/// returns it, as a lost context does. The first matching rule wins.
///
/// ```
/// use cuda_sys::CUresult;
/// let plan = cuda_sim::FaultPlan::new()
///     .fail_nth(3, CUresult::CUDA_ERROR_OUT_OF_MEMORY)
///     .fail_every("cuEventCreate", CUresult::CUDA_ERROR_NOT_SUPPORTED)
///     .fail_nth_of("cuMemAlloc", 1, CUresult::CUDA_ERROR_OUT_OF_MEMORY);
/// assert_eq!(plan.len(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: Vec<Rule>,
}

impl FaultPlan {
    /// A plan that fails nothing.
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Fails the `n`-th counted call of the session (0-based) with `code`.
    pub fn fail_nth(mut self, n: u64, code: CUresult) -> FaultPlan {
        self.rules.push(Rule::Nth { n, code });
        self
    }

    /// Fails every call of the entry point `name` (`"cuMemAlloc"`) with `code`.
    pub fn fail_every(mut self, name: &str, code: CUresult) -> FaultPlan {
        self.rules.push(Rule::Every { name: name.to_owned(), code });
        self
    }

    /// Fails the `k`-th call (0-based) of the entry point `name` with `code`.
    pub fn fail_nth_of(mut self, name: &str, k: u64, code: CUresult) -> FaultPlan {
        self.rules.push(Rule::NthOf { name: name.to_owned(), k, code });
        self
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the plan fails nothing.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The code for the call that is the session's `n`-th call and the
    /// `k`-th call of `name`, if a rule fails it.
    pub(crate) fn decide(&self, n: u64, name: &str, k: u64) -> Option<CUresult> {
        self.rules.iter().find_map(|r| match r {
            Rule::Nth { n: m, code } if *m == n => Some(*code),
            Rule::Every { name: x, code } if x == name => Some(*code),
            Rule::NthOf { name: x, k: j, code } if x == name && *j == k => Some(*code),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_by_index_and_name() {
        let oom = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
        let p = FaultPlan::new().fail_nth(2, oom).fail_nth_of("cuMemAlloc", 1, oom);
        assert_eq!(p.decide(2, "cuInit", 0), Some(oom));
        assert_eq!(p.decide(1, "cuMemAlloc", 0), None);
        assert_eq!(p.decide(5, "cuMemAlloc", 1), Some(oom));
        let e = FaultPlan::new().fail_every("cuEventCreate", oom);
        assert_eq!(e.decide(9, "cuEventCreate", 7), Some(oom));
        assert!(FaultPlan::new().is_empty());
    }
}
