from knee.cli import main

main()
