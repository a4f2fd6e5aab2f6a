// Any permutation of 1..n in which no element stays at its place (a derangement).
#include "testlib.h"
using namespace std;
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt(2, 100000, "n");
    vector<int> p = ouf.readInts(n, 1, n, "p");
    vector<bool> seen(n + 1);
    for (int i = 0; i < n; i++) {
        if (seen[p[i]]) quitf(_wa, "%d appears twice", p[i]);
        seen[p[i]] = true;
        if (p[i] == i + 1) quitf(_wa, "p[%d] = %d stays at its place", i + 1, p[i]);
    }
    quitf(_ok, "a derangement of %d", n);
}
