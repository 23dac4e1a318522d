#[test]
fn integration_adds() {
    assert_eq!(calc::add(1, 2), 3);
}

#[test]
fn integration_panics() {
    panic!("boom");
}
