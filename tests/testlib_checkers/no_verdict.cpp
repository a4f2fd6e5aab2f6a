// A checker that reads an answer and returns: it judged nothing, so it fails.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    ouf.readInt();
    return 0;
}
