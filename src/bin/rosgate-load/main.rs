fn main() {
    eprintln!("rosgate-load: not built yet");
    std::process::exit(2)
}
