/* make sanitize: LD_PRELOADed so that Open MPI's plugins stay mapped until
 * exit, and LeakSanitizer names their allocations by library (and
 * scripts/lsan.supp can suppress them) instead of "<unknown module>". */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
