fn main() {
    std::process::exit(cugrade::run());
}
