"""The guessing game the interactor tests play (``testlib_checkers/guess_interactor.cpp``): a
number from 1 to 1,000,000 found by binary search, in at most 20 questions."""

BINARY_SEARCH = """
lo, hi = 1, 1000000
while True:
    m = (lo + hi) // 2
    print('?', m, flush=True)
    r = input()
    if r == '=':
        print('!', m, flush=True)
        break
    if r == '>':
        lo = m + 1
    else:
        hi = m - 1
"""
