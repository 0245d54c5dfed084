/* placeholder until written: skipped */
int main(void) { return 77; }
