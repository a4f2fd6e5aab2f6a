// A validator that never checks that its test ends: it validated only a part of it.
#include "testlib.h"
int main() {
    registerValidation();
    inf.readInt(1, 100, "a");
    return 0;
}
