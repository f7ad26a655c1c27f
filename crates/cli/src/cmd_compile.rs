//! `netsift compile`: compile a filter expression and print it like `tcpdump -d/-dd/-ddd`, or
//! print a stage of the compiler (`--dump ast|pred|bpf`).

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;
use netsift::Target;
use netsift::bpf::asm;
use netsift::capture::{CaptureReader, LinkType};

use crate::expr;
use crate::program::DEFAULT_SNAPLEN;

/// What to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dump {
    /// The syntax tree.
    Ast,
    /// The Pred IR.
    Pred,
    /// The unoptimised and the optimised program, one after the other.
    Bpf,
}

/// Flags of `netsift compile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub compile: expr::CompileArgs,
    /// Print the program as `tcpdump -d` (the default).
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    d: u8,
    /// Compile for this capture file's link type and snap length, as `tcpdump -r FILE -d`.
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<std::path::PathBuf>,
    /// Print a compiler stage instead of the program.
    #[arg(long, value_enum)]
    dump: Option<Dump>,
    /// The filter expression.
    #[arg(value_name = "EXPR", trailing_var_arg = true)]
    expr: Vec<String>,
}

/// Run `netsift compile`.
pub fn run(args: Args) -> Result<ExitCode> {
    let text = args.expr.join(" ");
    let base = match &args.read {
        Some(path) => {
            let reader = CaptureReader::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Target::for_capture(&reader)
        }
        None => Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN),
    };
    let target = args.compile.target(base)?;
    match args.dump {
        Some(Dump::Ast) => {
            let ast = expr::parse_or_report(&text)?;
            println!("{ast:#?}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(Dump::Pred) => {
            let pred = expr::lower_or_report(&text, &target)?;
            println!("{pred}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(Dump::Bpf) => {
            for optimize in [false, true] {
                let p = expr::compile_or_report(&text, &target.with_optimize(optimize))?;
                println!(
                    "; {} ({} instructions)",
                    if optimize { "optimised" } else { "unoptimised" },
                    p.len()
                );
                print!("{}", asm::dump(&p, asm::Format::Asm));
            }
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let program = expr::compile_or_report(&text, &target)?;
    let format = match args.d {
        0 | 1 => asm::Format::Asm,
        2 => asm::Format::C,
        _ => asm::Format::Decimal,
    };
    print!("{}", asm::dump(&program, format));
    Ok(ExitCode::SUCCESS)
}
