//! The `mbsfmu` command line tool.

fn main() {
    eprintln!("mbsfmu: not yet");
    std::process::exit(2);
}
