from marketing_cli.cli.main import run

if __name__ == "__main__":
    run()
