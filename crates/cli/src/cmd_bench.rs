//! `netsift bench SUITE`: run a benchmark suite and print netsift against its baseline, both
//! measured in this run on the same packets.

use std::process::ExitCode;

use anyhow::{Result, anyhow};
use netsift_bench::suite;

/// Flags of `netsift bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The suite to run (`netsift bench --list` shows them).
    #[arg(value_name = "SUITE", required_unless_present = "list")]
    suite: Option<String>,
    /// List the suites.
    #[arg(long)]
    list: bool,
}

/// Run `netsift bench`.
pub fn run(args: Args) -> Result<ExitCode> {
    if args.list {
        for (name, about) in suite::SUITES {
            println!("{name:<10} {about}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = args.suite.unwrap_or_default();
    let report = suite::run(&name).map_err(|e| anyhow!(e))?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}
