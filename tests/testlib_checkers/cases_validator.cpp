// Written for these tests: a multi-test validator (t cases of n and n numbers, each case named
// with setTestCase) whose bounds depend on its testset and group, as Polygon runs validators.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerValidation(argc, argv);
    int most = validator.testset() == "pretests" ? 10 : 1000;
    int t = inf.readInt(1, 5, "t");
    inf.readEoln();
    for (int test = 1; test <= t; test++) {
        setTestCase(test);
        int n = inf.readInt(1, most, "n");
        inf.readEoln();
        std::vector<int> a = inf.readInts(n, -most, most, "a");
        inf.readEoln();
        if (validator.group() == "sorted") ensuref(std::is_sorted(a.begin(), a.end()), "a is not sorted");
    }
    unsetTestCase();
    inf.readEof();
}
