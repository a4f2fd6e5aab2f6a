// Written for these tests in the way testlib's own rcmp6 does it: doubles within 1e-6.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = 0;
    double j = 0, p = 0;
    while (!ans.seekEof()) {
        n++;
        j = ans.readDouble();
        p = ouf.readDouble();
        if (!doubleCompare(j, p, 1E-6))
            quitf(_wa, "%d%s numbers differ - expected: '%.7f', found: '%.7f', error = '%.7f'", n,
                  englishEnding(n).c_str(), j, p, doubleDelta(j, p));
    }
    if (n == 1) quitf(_ok, "found '%.7f', expected '%.7f', error '%.7f'", p, j, doubleDelta(j, p));
    quitf(_ok, "%d numbers", n);
}
