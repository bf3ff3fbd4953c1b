from patchit.cli import main

main()
