fn main() {
    let e = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let mut k = 0;
    for _ in 0..n {
        k += netsift_lang::lexer::tokenize(std::hint::black_box(&e))
            .unwrap()
            .len();
    }
    println!("{k}");
}
