//! The error of every fallible table, profile and NIC operation.

use std::fmt;

use crate::rule::RuleId;

/// Why a rule could not be installed, removed or emitted.
///
/// The message names the rule and, for a capability problem, the limit that was hit, so that a
/// caller can log it and fall back to filtering the rule's packets in software.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffloadError {
    kind: ErrorKind,
    rule: Option<RuleId>,
    message: String,
}

/// The kinds of [`OffloadError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The table (or the profile's filter class) is full.
    Capacity,
    /// The rule's address family is not supported by the profile (the 82599 filters are IPv4
    /// only), or its addresses are of two different families.
    Family,
    /// A field's mask is not one the profile can express (a partial mask on an all-or-nothing
    /// field, a mask on a field the filter cannot compare).
    Mask,
    /// The rule's mask differs from the global mask shared by all Flow Director filters.
    MaskConflict,
    /// The priority is outside the profile's range.
    Priority,
    /// The IP protocol cannot be matched by the profile.
    Protocol,
    /// The action cannot be expressed (a queue beyond the NIC's queues, `pass` in ethtool).
    Action,
    /// Another rule already has the same hash key: the same precise tuple, or (Flow Director)
    /// the same masked tuple or signature.
    Conflict,
    /// An interface name that commands cannot be written for.
    Device,
    /// A rule with this id is already installed.
    DuplicateId,
    /// No rule with this id is installed.
    UnknownId,
    /// The kernel refused an operation of the XDP back end (a map update or lookup); the
    /// message carries the kernel's error.
    Kernel,
}

impl OffloadError {
    /// An error of `kind` about `rule` (if any) with a message for people.
    pub fn new(kind: ErrorKind, rule: Option<RuleId>, message: impl Into<String>) -> OffloadError {
        OffloadError {
            kind,
            rule,
            message: message.into(),
        }
    }

    /// The kind of problem.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The rule the error is about, when there is one.
    pub fn rule(&self) -> Option<RuleId> {
        self.rule
    }

    /// The message, without the rule id.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the caller can keep the rule by filtering its packets in software instead: true
    /// for every capability problem, false for id bookkeeping errors.
    pub fn is_capability(&self) -> bool {
        !matches!(self.kind, ErrorKind::DuplicateId | ErrorKind::UnknownId)
    }
}

impl fmt::Display for OffloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Some(id) => write!(f, "rule {}: {}", id.0, self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for OffloadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_rule() {
        let e = OffloadError::new(
            ErrorKind::Capacity,
            Some(RuleId(7)),
            "table full (128 rules)",
        );
        assert_eq!(e.to_string(), "rule 7: table full (128 rules)");
        assert!(e.is_capability());
        let e = OffloadError::new(ErrorKind::UnknownId, None, "no rule 3");
        assert_eq!(e.to_string(), "no rule 3");
        assert!(!e.is_capability());
    }
}
