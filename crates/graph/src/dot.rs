//! The instantiated graph as Graphviz (the paper's Fig. 3): the flows as the users wrote them
//! (ovals), the filter instances they map to (circles: one per node, shared by every flow
//! that uses it), and the classes the instances come from (boxes). Solid edges carry packets
//! (upstream instance → instance), dashed edges go from a flow to the instances it uses,
//! dotted edges from an instance to its class.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::dataflow::{Dataflow, NodeId};

/// A flow as the diagram shows it.
#[derive(Clone, Debug)]
pub struct FlowLabel {
    /// The flow's number.
    pub id: u64,
    /// The graph text the user wrote.
    pub text: String,
    /// The instances it uses.
    pub nodes: Vec<NodeId>,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Shorten long labels (expressions, patterns) for the diagram.
fn short(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX - 1).collect();
        format!("{head}…")
    }
}

/// The Graphviz text of `graph` with `flows`.
pub fn render(graph: &Dataflow, flows: &[FlowLabel]) -> String {
    let mut out = String::from(
        "digraph ffpf {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n",
    );
    for f in flows {
        let _ = writeln!(
            out,
            "  flow{} [shape=ellipse, style=filled, fillcolor=\"#dde8f7\", label=\"flow {}\\n{}\"];",
            f.id,
            f.id,
            escape(&short(&f.text))
        );
    }
    let mut classes = BTreeSet::new();
    for (id, n) in graph.nodes() {
        let args: Vec<String> = n
            .args
            .iter()
            .map(|a| {
                if a.quoted {
                    format!("\"{}\"", a.text)
                } else {
                    a.text.clone()
                }
            })
            .collect();
        let mbuf = if n.mbuf.is_empty() {
            String::new()
        } else {
            format!("\\nMBuf {} B", n.mbuf.len())
        };
        let _ = writeln!(
            out,
            "  n{id} [shape=circle, label=\"{}#{id}\\n{}{mbuf}\\n{} in / {} out\\n{} flow{}\"];",
            n.class.name(),
            escape(&short(&args.join(","))),
            n.seen,
            n.passed,
            n.users,
            if n.users == 1 { "" } else { "s" }
        );
        for &u in &n.upstream {
            let _ = writeln!(out, "  n{u} -> n{id};");
        }
        classes.insert(n.class.name());
        let _ = writeln!(
            out,
            "  n{id} -> class_{} [style=dotted, arrowhead=none];",
            n.class.name()
        );
    }
    for c in &classes {
        let _ = writeln!(
            out,
            "  class_{c} [shape=box, style=filled, fillcolor=\"#eeeeee\", label=\"{c}\"];"
        );
    }
    for f in flows {
        for &n in &f.nodes {
            let _ = writeln!(
                out,
                "  flow{} -> n{n} [style=dashed, color=\"#6a8cc7\"];",
                f.id
            );
        }
    }
    out.push_str("}\n");
    out
}
