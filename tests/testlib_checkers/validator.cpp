// A validator: reads the test from stdin strictly, two integers on one line and nothing else.
#include "testlib.h"
int main() {
    registerValidation();
    inf.readInt(1, 100, "a");
    inf.readSpace();
    inf.readInt(1, 100, "b");
    inf.readEoln();
    inf.readEof();
    return 0;
}
