//! Criterion benchmark: one Swift update — add one FTP data connection to a filter holding N
//! (N = 1, 100, 10,000), then delete it so that N stays fixed — as a pass of its own and as a
//! child of the control pass (see `netsift_bench::update`; `netsift bench update` times the add
//! and the delete separately and compares them with recompiling).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use netsift_bench::update::{Connection, Fixture, Form};

fn updates(c: &mut Criterion) {
    let mut group = c.benchmark_group("swift_update");
    for n in [1usize, 100, 10_000] {
        for form in Form::ALL {
            let mut f = Fixture::new(form, n).expect("the filter builds");
            let probe = Connection::nth(n);
            let id = f.add(&probe).expect("adds");
            assert_ne!(f.verdict(&probe), 0, "the new connection is accepted");
            f.del(id).expect("deletes");
            assert_eq!(f.verdict(&probe), 0, "the deleted connection is rejected");
            group.bench_function(format!("{}/add+del/N={n}", form.name()), |b| {
                b.iter(|| {
                    let id = f.add(black_box(&probe)).expect("adds");
                    f.del(black_box(id)).expect("deletes");
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, updates);
criterion_main!(benches);
