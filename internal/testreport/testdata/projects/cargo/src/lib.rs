/// Adds two numbers.
///
/// ```
/// assert_eq!(calc::add(2, 3), 5);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

/// Subtracts two numbers.
///
/// ```
/// assert_eq!(calc::sub(5, 3), 3);
/// ```
pub fn sub(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }

    #[test]
    fn subtracts() {
        assert_eq!(sub(5, 3), 3);
    }

    #[test]
    #[ignore]
    fn slow() {
        assert_eq!(add(1, 1), 2);
    }

    mod nested {
        #[test]
        fn deep() {
            assert_eq!(super::add(1, 1), 2);
        }
    }
}
