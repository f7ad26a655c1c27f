//! Rule-set files as `netsift classify` and `netsift hitables` read them: ClassBench rule sets
//! (lines starting with `@`) or `iptables-save` output, told apart by their first rule line.

use std::path::Path;

use anyhow::{Context, Result};
use netsift::classify::iptables::{self, ConvertOptions, Ruleset};
use netsift::classify::{Rule, classbench};

/// A rule-set file.
pub enum RuleFile {
    /// A ClassBench rule set.
    ClassBench(Vec<Rule>),
    /// An iptables rule set.
    Iptables(Ruleset),
}

/// Read `path`, deciding the format by the first line that is neither blank nor a comment.
pub fn read(path: &Path) -> Result<RuleFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    if first.is_some_and(|l| l.starts_with('@')) {
        let rules = classbench::parse_rules(&text).with_context(|| path.display().to_string())?;
        Ok(RuleFile::ClassBench(rules))
    } else {
        let rs = iptables::parse(&text).with_context(|| path.display().to_string())?;
        Ok(RuleFile::Iptables(rs))
    }
}

/// The rule set as iptables: ClassBench rules converted into `chain` (see
/// [`iptables::from_classbench`]; rules iptables cannot say exactly are an error naming them).
pub fn as_iptables(file: RuleFile, chain: &str, path: &Path) -> Result<Ruleset> {
    match file {
        RuleFile::Iptables(rs) => Ok(rs),
        RuleFile::ClassBench(rules) => {
            let c = iptables::from_classbench(
                &rules,
                &ConvertOptions {
                    chain: chain.to_string(),
                    ..ConvertOptions::default()
                },
            );
            if let Some(&i) = c.inexact.first() {
                anyhow::bail!(
                    "{}: line {}: iptables cannot match this rule exactly (ports on a protocol \
                     other than TCP or UDP, or a protocol range); {} such rule(s)",
                    path.display(),
                    rules[i].line,
                    c.inexact.len()
                );
            }
            Ok(c.ruleset)
        }
    }
}
